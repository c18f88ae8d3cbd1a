-- $(run CMD): a shell command under the session's access level. When the role can write,
-- the command is approved like an edit of the same risk (lib/agent/risk.lua), snapshotted
-- before it runs, and a change it makes to the tree counts as an edit for validation.

local function writes() return moss.access.get() == "edit" or moss.access.get() == "full" end

local function format(r)
  local parts = {}
  if r.stdout ~= "" then parts[#parts + 1] = r.stdout:gsub("\n$", "") end
  if r.stderr ~= "" then parts[#parts + 1] = "[stderr]\n" .. r.stderr:gsub("\n$", "") end
  parts[#parts + 1] = r.timed_out and "[timed out]" or ("[exit code " .. tostring(r.code) .. "]")
  return table.concat(parts, "\n"), (r.code == 0 and not r.timed_out)
end

return {
  name = "run",
  help = "run CMD — a shell command (sandboxed by the role's access level)",
  access = "read-shell",
  needs = "agent", -- the coding agent's policy (lib/agent), required only when it runs
  tool = true,
  writes = writes,
  details = function()
    return "  A heredoc's body is taken as it is, quotes and parentheses included: $(run cat > notes.txt <<'EOF'" ..
      "\n<the text>\nEOF)"
  end,
  parse = function(text)
    if text == "" then moss.error("usage", "run needs a command: $(run cargo test)") end
    -- a command written in a fence of its own runs as the code in it
    local code, fence = require("lib.machine.parser").unfence(text)
    if fence and not code then
      moss.error("usage", "the " .. fence .. " fence around the command is not closed by a line of its own")
    end
    return { code and code:gsub("\n$", "") or text }
  end,
  run = function(ctx, a)
    local env = ctx.env
    local w
    if writes() then
      local level, reason = require("lib.agent.risk").assess_command(a[1])
      local refusal = require("lib.agent.edits").approve(env, level, reason, "`" .. a[1] .. "`", "Not run")
      if refusal then return refusal, false, true end
      w = env.before_write and env.before_write("run " .. a[1])
    end
    -- at edit access the host locks the project root while it runs, or the role's `locks` paths
    local ok, r = pcall(moss.shell.run, a[1], { locks = env.role and env.role.locks or nil })
    local note = w and env.after_write and env.after_write(w) -- always: the command may have written
    if not ok then error(r, 0) end
    local content, success = format(r)
    if note then content = content .. "\n" .. note end
    return content, success
  end,
}
