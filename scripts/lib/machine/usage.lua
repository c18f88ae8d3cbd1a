-- A session's LLM usage across runs of it: what earlier runs (before a resume) used, plus
-- what this process used since the session (or this pipeline stage) started here.
local M = {}

M.KEYS = { "input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens", "cost_usd", "calls" }

--- env.usage_start is moss.llm.usage() when the run began; S.usage_prior what S had then.
function M.of_session(S, env)
  local now, start, prior = moss.llm.usage(), env.usage_start or {}, S.usage_prior or {}
  local u = moss.dict()
  for _, k in ipairs(M.KEYS) do
    local v = (prior[k] or 0) + (now[k] or 0) - (start[k] or 0)
    if k == "cost_usd" then v = math.floor(v * 1e6 + 0.5) / 1e6 end
    u[k] = v
  end
  u.cost_known = now.cost_known ~= false and prior.cost_known ~= false
  return u
end

return M
