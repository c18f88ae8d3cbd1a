-- Command-line flag parsing for scripts: a spec table in, options and positionals out.
--
--   local cli = require("lib.cli")
--   local opts, rest = cli.parse(moss.args, {
--     { "--max-turns", type = "number", help = "turn limit" },
--     { "--v2", type = "flag", help = "explorer/evaluator machine" },
--     { "-n", "--non-interactive", type = "flag", key = "non_interactive" },
--   })
--
-- A spec with `multiple = true` may be given again; its value is then the list of them.
-- Unknown flags are an error (a typo should not silently become part of the task).
local M = {}

local function key_of(spec)
  if spec.key then return spec.key end
  local long = spec[#spec]
  return (long:gsub("^%-+", ""):gsub("%-", "_"))
end

--- Parse `args` against `spec`; returns (options, positionals) or raises a usage error.
function M.parse(args, spec)
  local by_name, opts, rest = {}, {}, {}
  for _, s in ipairs(spec) do
    for _, name in ipairs(s) do by_name[name] = s end
    if s.default ~= nil then opts[key_of(s)] = s.default end
  end
  local i = 1
  while i <= #args do
    local word = args[i]
    if word == "--" then
      for j = i + 1, #args do rest[#rest + 1] = args[j] end
      break
    end
    local name, inline = word:match("^(%-%-?[%w][%w%-]*)=(.*)$")
    name = name or word
    local s = word:sub(1, 1) == "-" and #word > 1 and by_name[name] or nil
    if s then
      local key = key_of(s)
      if s.type == "flag" then
        if inline then moss.error("usage", name .. " takes no value", 2) end
        opts[key] = true
      else
        local value = inline
        if value == nil then
          local nxt = args[i + 1]
          if s.optional_value and (nxt == nil or (nxt:sub(1, 1) == "-" and not tonumber(nxt))) then
            value = true -- "--resume -n": the flag without its optional value
          else
            i = i + 1
            value = args[i]
          end
          if value == nil then moss.error("usage", name .. " needs a value", 2) end
        end
        if s.type == "number" then
          local n = tonumber(value)
          if not n then moss.error("usage", name .. " expects a number, got '" .. tostring(value) .. "'", 2) end
          value = n
        elseif s.choices and value ~= true then
          local ok = false
          for _, c in ipairs(s.choices) do if c == value then ok = true end end
          if not ok then
            moss.error("usage",
              name .. " must be one of " .. table.concat(s.choices, ", ") .. "; got '" .. value .. "'", 2)
          end
        end
        if s.multiple then
          opts[key] = opts[key] or {}
          table.insert(opts[key], value)
        else
          opts[key] = value
        end
      end
    elseif word:sub(1, 1) == "-" and #word > 1 and not tonumber(word) then
      moss.error("usage", "unknown option " .. name .. " (see --help)", 2)
    else
      rest[#rest + 1] = word
    end
    i = i + 1
  end
  return opts, rest
end

--- Render the spec as aligned help lines.
function M.help(spec)
  local lines, width = {}, 0
  local left = {}
  for i, s in ipairs(spec) do
    local names = table.concat(s, ", ")
    if s.type ~= "flag" then names = names .. " " .. (s.metavar or (s.type == "number" and "N" or "VALUE")) end
    left[i] = names
    if #names > width then width = #names end
  end
  for i, s in ipairs(spec) do
    lines[#lines + 1] = "  " .. left[i] .. string.rep(" ", width - #left[i] + 2) .. (s.help or "")
  end
  return table.concat(lines, "\n")
end

--- A script's `main`: parse `args` against `spec`, print `help` for -h/--help, run
--- `commands[rest[1]]` (a subcommand, its word removed) or `commands[1]` with (opts, rest).
--- Errors become one red line and an exit status: 2 for usage, not_found, config and denied,
--- 1 for the rest; an interrupt goes on up (the host exits 130).
function M.main(args, spec, help, commands)
  local ok, opts, rest = pcall(M.parse, args, spec)
  if not ok then
    moss.ui.print(tostring(opts.message or opts), { style = "red" })
    return 2
  end
  if opts.help then print(help) return 0 end
  local run = commands[1]
  if rest[1] ~= nil and commands[rest[1]] then
    run = commands[table.remove(rest, 1)]
  end
  local okr, code = pcall(run, opts, rest)
  if not okr then
    local kind = moss.error_kind(code)
    if kind == "interrupted" then error(code, 0) end
    moss.ui.print(tostring(code.message or code), { style = "red" })
    return (kind == "usage" or kind == "not_found" or kind == "config" or kind == "denied") and 2 or 1
  end
  return code
end

return M
