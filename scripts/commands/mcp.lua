-- $(mcp SERVER TOOL {json}): call a tool of an MCP server from [mcp.servers.NAME].
--
-- Offered (added to a state's "tools") only when the session's access level reaches what
-- some configured server needs: `full`, or `read-only` for a server your user config declares
-- access = "read-only". The host enforces that on every call (moss.mcp.call). The system
-- prompt lists each usable server's tools under the command's line (`details`), as
-- `$(mcp SERVER TOOL {...})` with their parameters, so the model sees them like moss's own.
local LEVEL = {}
for i, l in ipairs(moss.access.levels()) do LEVEL[l] = i end

-- The configured servers, asked once: the list comes from the config, which a run does not
-- change, and offer() is asked on every turn (the system prompt, each command's check).
local servers
local function configured()
  if servers == nil then servers = moss.mcp.servers() end
  return servers
end

local function usable()
  local list = configured()
  if #list == 0 then return {} end
  local have = LEVEL[moss.access.get()] or 1
  local out = {}
  for _, s in ipairs(list) do
    if s.transport ~= "unusable" and (LEVEL[s.access] or 99) <= have then out[#out + 1] = s end
  end
  return out
end

local function details()
  local lines = {}
  for _, s in ipairs(usable()) do
    local ok, tools = pcall(moss.mcp.tools, s.name)
    if not ok then
      lines[#lines + 1] = "  (" .. s.name .. ": unavailable: " .. tostring(tools.message or tools) .. ")"
    else
      for _, t in ipairs(tools) do
        local desc = (t.description or ""):gsub("%s+", " ")
        if #desc > 160 then desc = desc:sub(1, 157) .. "..." end
        lines[#lines + 1] = ("  $(mcp %s %s %s) — %s"):format(s.name, t.name, t.params, desc)
      end
    end
  end
  return table.concat(lines, "\n")
end

return {
  name = "mcp",
  help = "mcp SERVER TOOL {json} — call a tool of an MCP server with JSON arguments (its tools are listed below)",
  access = "read-only", -- the least; each server needs full unless your user config says read-only
  tool = true,
  offer = function() return #usable() > 0 end,
  details = details,
  parse = function(text)
    local server, tool, rest = text:match("^%s*(%S+)%s+(%S+)%s*(.-)%s*$")
    if not server then
      moss.error("usage", 'mcp needs a server and a tool: $(mcp SERVER TOOL {"arg": "value"})')
    end
    local args = moss.dict()
    if rest ~= "" then
      local ok, decoded = pcall(moss.json.decode, rest)
      if not ok or type(decoded) ~= "table" or (#decoded > 0) then
        moss.error("usage", "the arguments of $(mcp " .. server .. " " .. tool ..
          ") must be one JSON object, e.g. {\"path\": \"README.md\"}")
      end
      args = moss.dict(decoded)
    end
    return { server, tool, args }
  end,
  run = function(_, a)
    local r = moss.mcp.call(a[1], a[2], a[3])
    return r.text, not r.is_error
  end,
}
