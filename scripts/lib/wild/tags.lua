-- The Wild Loop's response grammar: XML-ish tags around JSON or a word.
--
--   <sweep>{"name": ..., "base_command": ..., "parameters": {...}, "workdir": ..., "max_runs": N,
--           "resources": {"num_cpus": 1, "num_gpus": 0}}</sweep>
--   <resolve_alert>{"alert_id": "...", "choice": "..."}</resolve_alert>
--   <promise>CONTINUE|COMPLETE|NEEDS_HUMAN</promise>      (<signal>...</signal> is an alias)
--
-- Tag names are case-insensitive; the JSON may sit in a ``` fence inside the tag.
local json = moss.json

local M = {}

M.PROMISES = { CONTINUE = true, COMPLETE = true, NEEDS_HUMAN = true }

--- The inner texts of every <tag>...</tag> in `text`, in order.
function M.find(text, tag)
  local out = {}
  local lower = text:lower()
  local open, close = "<" .. tag:lower() .. ">", "</" .. tag:lower() .. ">"
  local pos = 1
  while true do
    local s, e = lower:find(open, pos, true)
    if not s then break end
    local cs, ce = lower:find(close, e + 1, true)
    if not cs then break end
    out[#out + 1] = text:sub(e + 1, cs - 1)
    pos = ce + 1
  end
  return out
end

-- The JSON inside a tag, without a surrounding ``` fence.
local function unfence(inner)
  local s = inner:gsub("^%s+", ""):gsub("%s+$", "")
  local body = s:match("^```[%w_-]*%s*\n(.-)\n?```$")
  return body or s
end

local function decode(inner, what)
  local ok, v = pcall(json.decode, unfence(inner), { ordered = true })
  if not ok then
    local why = tostring(v.message or v):gsub("^moss%.json%.decode: invalid JSON ", "")
    return nil, what .. " is not valid JSON: " .. why
  end
  if type(v) ~= "table" or not json.is_object(v) then return nil, what .. " must be a JSON object" end
  return v
end

local function nonempty_string(v) return type(v) == "string" and v:match("%S") ~= nil end

--- The first <sweep> in `text`: spec (name, base_command, parameters (ordered), workdir,
-- max_runs, alerts) or nil, plus an error when a tag was there but is not a valid sweep.
function M.sweep(text)
  local found = M.find(text, "sweep")
  if #found == 0 then
    if text:lower():find("<sweep>", 1, true) then return nil, "<sweep> has no closing </sweep>" end
    return nil
  end
  local v, err = decode(found[1], "<sweep>")
  if not v then return nil, err end
  local missing = {}
  for _, k in ipairs({ "name", "base_command", "parameters" }) do
    if v[k] == nil or v[k] == json.null then missing[#missing + 1] = k end
  end
  if #missing > 0 then return nil, "<sweep> is missing required field(s): " .. table.concat(missing, ", ") end
  if not nonempty_string(v.name) then return nil, "<sweep> name must be a non-empty string" end
  if not nonempty_string(v.base_command) then return nil, "<sweep> base_command must be a non-empty string" end
  if type(v.parameters) ~= "table" or not json.is_object(v.parameters) then
    return nil, '<sweep> parameters must be an object like {"lr": [0.001, 0.01]}'
  end
  local params = {}
  for _, k in ipairs(json.keys(v.parameters)) do
    local val = v.parameters[k]
    if type(val) == "table" and val ~= json.null and not json.is_object(val) then
      params[#params + 1] = { key = k, values = val }
    else
      params[#params + 1] = { key = k, values = { val } } -- a scalar is a one-item list
    end
  end
  local workdir = v.workdir
  if workdir == json.null then workdir = nil end
  if workdir ~= nil and not nonempty_string(workdir) then return nil, "<sweep> workdir must be a path string" end
  local max_runs = v.max_runs
  if max_runs == json.null then max_runs = nil end
  if max_runs ~= nil and (math.type(max_runs) ~= "integer" or max_runs < 1) then
    return nil, "<sweep> max_runs must be a positive integer"
  end
  local alerts = v.alerts
  if alerts == json.null then alerts = nil end
  if alerts ~= nil and (type(alerts) ~= "table" or json.is_object(alerts)) then
    return nil, '<sweep> alerts must be a list of rules like ["loss is nan", "loss > 8"]'
  end
  local resources = v.resources
  if resources == json.null then resources = nil end
  if resources ~= nil then
    if type(resources) ~= "table" or not json.is_object(resources) then
      return nil, '<sweep> resources must be an object like {"num_cpus": 2, "num_gpus": 1}'
    end
    for _, k in ipairs(json.keys(resources)) do
      if (k ~= "num_cpus" and k ~= "num_gpus") or type(resources[k]) ~= "number" or resources[k] < 0 then
        return nil, '<sweep> resources takes "num_cpus" and "num_gpus", each a number of at least 0 (per run)'
      end
    end
  end
  return {
    name = v.name, base_command = v.base_command, parameters = params, workdir = workdir,
    max_runs = max_runs, alerts = alerts, resources = resources, extra = #found - 1,
  }
end

--- Every <resolve_alert> in `text`: a list of {alert_id=, choice=}, and a list of errors.
function M.resolutions(text)
  local out, errors = {}, {}
  for _, inner in ipairs(M.find(text, "resolve_alert")) do
    local v, err = decode(inner, "<resolve_alert>")
    if not v then
      errors[#errors + 1] = err
    elseif not nonempty_string(v.alert_id) or not nonempty_string(v.choice) then
      errors[#errors + 1] = '<resolve_alert> needs both "alert_id" and "choice" as strings'
    else
      out[#out + 1] = { alert_id = v.alert_id, choice = v.choice }
    end
  end
  return out, errors
end

--- The loop signal: the last <promise> (or <signal>) in `text`, upper-cased, or nil; plus an
-- error for a value that is not CONTINUE, COMPLETE or NEEDS_HUMAN.
function M.promise(text)
  local last, last_pos = nil, -1
  for _, tag in ipairs({ "promise", "signal" }) do
    local lower = text:lower()
    local pos = 1
    while true do
      local s, e = lower:find("<" .. tag .. ">", pos, true)
      if not s then break end
      local cs, ce = lower:find("</" .. tag .. ">", e + 1, true)
      if not cs then break end
      if s > last_pos then last, last_pos = text:sub(e + 1, cs - 1), s end
      pos = ce + 1
    end
  end
  if not last then return nil end
  local word = last:gsub("^%s+", ""):gsub("%s+$", ""):upper():gsub("[%s-]+", "_")
  if M.PROMISES[word] then return word end
  return nil, "unknown signal <promise>" .. last .. "</promise>: use CONTINUE, COMPLETE or NEEDS_HUMAN"
end

--- `text` without the loop's tags (the analysis, as a final answer).
function M.strip(text)
  local out = text
  for _, tag in ipairs({ "promise", "signal", "resolve_alert", "sweep" }) do
    local lower = out:lower()
    local parts, pos = {}, 1
    while true do
      local s, e = lower:find("<" .. tag .. ">", pos, true)
      if not s then break end
      local cs, ce = lower:find("</" .. tag .. ">", e + 1, true)
      if not cs then break end
      parts[#parts + 1] = out:sub(pos, s - 1)
      pos = ce + 1
    end
    parts[#parts + 1] = out:sub(pos)
    out = table.concat(parts)
  end
  return (out:gsub("\n%s*\n%s*\n+", "\n\n"):gsub("^%s+", ""):gsub("%s+$", ""))
end

return M
