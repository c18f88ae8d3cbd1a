-- The validation pipeline, from [agent] config:
--
--   validate = ["typecheck", "test"]                       -- which steps, in order
--   validate_commands = [ { name = "typecheck", run = "cargo check" },
--                         { name = "test", run = "cargo test", timeout = 600 } ]
--   validate_on = "edit"                                   -- edit | done | turn | never
--
-- Unset: a validator is detected from the project's files, and the session says which.
-- `--validate CMD` adds a step. Any other [agent] field is yours to read in your own scripts.
local M = {}

local DETECT = {
  { file = "Cargo.toml", steps = { { name = "check", run = "cargo check --quiet" } } },
  { file = "go.mod", steps = { { name = "build", run = "go build ./..." } } },
  { file = "pyproject.toml", steps = { { name = "compile", run = "python3 -m compileall -q ." } } },
  { file = "setup.py", steps = { { name = "compile", run = "python3 -m compileall -q ." } } },
}

local function package_json_steps()
  local ok, text = pcall(moss.fs.read, "package.json")
  if not ok then return nil end
  local ok2, pkg = pcall(moss.json.decode, text)
  if not ok2 or type(pkg) ~= "table" or type(pkg.scripts) ~= "table" then return nil end
  for _, name in ipairs { "typecheck", "test", "build", "lint" } do
    if pkg.scripts[name] then return { { name = name, run = "npm run --silent " .. name } } end
  end
  return nil
end

--- Detect a validator from project files: (steps, description) or (nil, why not).
function M.detect()
  if moss.fs.exists("package.json") then
    local steps = package_json_steps()
    if steps then return steps, "package.json script '" .. steps[1].name .. "'" end
  end
  for _, d in ipairs(DETECT) do
    if moss.fs.exists(d.file) then return d.steps, d.file end
  end
  return nil, "no Cargo.toml, go.mod, pyproject.toml or package.json scripts found"
end

--- The steps to run: ({ {name, run, timeout} ... }, source description).
function M.steps(cfg, extra)
  cfg = cfg or {}
  if cfg.validate ~= nil and type(cfg.validate) ~= "table" then
    moss.error("config", "[agent] validate must be a list of step names, like validate = [\"test\"]")
  end
  local steps, source = {}, nil
  local by_name = {}
  for _, c in ipairs(cfg.validate_commands or {}) do by_name[c.name] = c end
  if cfg.validate and #cfg.validate > 0 then
    for _, name in ipairs(cfg.validate) do
      local c = by_name[name]
      if not c then
        moss.error("config", "[agent] validate names '" .. name .. "' but validate_commands has no such step")
      end
      steps[#steps + 1] = c
    end
    source = "config"
  elseif cfg.validate_commands and #cfg.validate_commands > 0 then
    for _, c in ipairs(cfg.validate_commands) do steps[#steps + 1] = c end
    source = "config"
  end
  for i, cmd in ipairs(extra or {}) do
    steps[#steps + 1] = { name = "validate" .. (i > 1 and i or ""), run = cmd }
  end
  if extra and #extra > 0 then source = source and (source .. " + --validate") or "--validate" end
  if #steps == 0 and cfg.validate_on ~= "never" then
    local found, why = M.detect()
    if found then return found, "detected from " .. why end
    return {}, why
  end
  return steps, source
end

local function head_tail(text, n)
  if #text <= 2 * n then return text end
  return text:sub(1, n) .. "\n… [" .. (#text - 2 * n) .. " characters cut] …\n" .. text:sub(-n)
end

--- The last `n` lines of `text` (without trailing blank lines).
function M.tail(text, n)
  local lines = {}
  for line in ((text or ""):gsub("%s+$", "") .. "\n"):gmatch("([^\n]*)\n") do lines[#lines + 1] = line end
  if #lines == 1 and lines[1] == "" then return "" end
  return table.concat(lines, "\n", math.max(1, #lines - n + 1))
end

-- A step that cannot run on this machine at all, whatever the code: the shell found no such
-- program or could not execute it (exit 127, 126), or the output says it needs a network or
-- a toolchain that is not here. Such a step would roll back correct work, so the session's
-- start reports it before the first turn.
local CANNOT_RUN = {
  "[Cc]ould not resolve host", "[Cc]ouldn't resolve host", "[Nn]etwork is unreachable",
  "[Tt]emporary failure in name resolution", "[Ff]ailed to connect to", "failed to download",
  "could not choose a version of", "toolchain '[^']*' is not installed",
}

local function cannot_run(code, output)
  if code == 126 or code == 127 then return true end
  for _, pat in ipairs(CANNOT_RUN) do
    if output:find(pat) then return true end
  end
  return false
end

--- Run the steps in order; stop at the first failure.
-- Returns { passed, failed = step|nil, report = text for the model, output = the failed
-- step's output, code = its exit code, timed_out, cannot_run = the step cannot run here }.
function M.run(steps)
  local lines = {}
  for _, step in ipairs(steps) do
    local ok, r = pcall(moss.shell.run, step.run, { timeout = step.timeout or 600, max_chars = 6000 })
    if not ok then
      local why = tostring(type(r) == "table" and r.message or r)
      return { passed = false, failed = step, output = why, cannot_run = true,
        report = ("Validation step %s (`%s`) could not run: %s"):format(step.name, step.run, why) }
    end
    if r.code ~= 0 or r.timed_out then
      local out, err = r.stdout or "", r.stderr or ""
      if err ~= "" then out = out:match("^%s*$") and err or (out .. "\n[stderr]\n" .. err) end
      return { passed = false, failed = step, output = out, code = r.code, timed_out = r.timed_out or nil,
        cannot_run = not r.timed_out and cannot_run(r.code, out) or nil,
        report = ("Validation FAILED at step %s (`%s`, %s):\n%s")
        :format(step.name, step.run, r.timed_out and "timed out" or ("exit " .. tostring(r.code)),
          head_tail(out, 1500)) }
    end
    lines[#lines + 1] = "✓ " .. step.name .. " (`" .. step.run .. "`)"
  end
  return { passed = true, report = "Validation passed:\n" .. table.concat(lines, "\n") }
end

return M
