-- $(await [ID]): wait for child agents (one, or every one not yet collected) and show their
-- results: each child's answer and the evidence it kept, as a command output. A child's
-- answer never becomes this agent's answer by itself.
local function children() return require("lib.agent.children") end

return {
  name = "await",
  help = "await [ID] — wait for child agents and see their answers",
  access = "read-only",
  needs = "agent", -- the coding agent's policy (lib/agent), required only when it runs
  tool = true,
  parse = function(text)
    local id = text:match("^%s*(%S+)%s*$")
    return { id }
  end,
  run = function(ctx, a)
    local S = ctx.S
    local list = children().pending(S, a[1])
    if #list == 0 then
      return a[1] and ("no child agent " .. a[1] .. " (see $(children))") or
        "no child agents are waiting to be collected", false
    end
    local parts, ok = {}, true
    for _, c in ipairs(list) do
      local h = moss.spawn { resume = c.id }
      local r = moss.agents.wait(h.id)
      c.delivered = true
      c.reason = r and r.reason
      parts[#parts + 1] = children().render(c, r)
      if not (r and r.success) then ok = false end
    end
    return table.concat(parts, "\n\n"), ok
  end,
}
