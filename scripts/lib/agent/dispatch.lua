-- Choosing a role for a task: a classifier call that sees only the task, with the seed's
-- keyword rules as the fallback when its answer is unusable.
local M = {}

-- Checked in this order; the role with the most keyword hits wins, ties go to the earlier.
M.KEYWORDS = {
  { role = "refactorer", words = { "fix", "refactor", "change", "update", "rename", "implement", "add", "remove" } },
  { role = "auditor",
    words = { "audit", "check", "issues", "issue", "vulnerabilities", "vulnerability", "security", "review" } },
  { role = "explorer", words = { "find", "search", "where", "how", "what", "which", "why", "explain" } },
}

function M.by_keywords(task)
  local words = {}
  for w in task:lower():gmatch("%a+") do words[w] = true end
  local best, best_n, hit = nil, 0, nil
  for _, rule in ipairs(M.KEYWORDS) do
    local n, first = 0, nil
    for _, w in ipairs(rule.words) do
      if words[w] then n = n + 1; first = first or w end
    end
    if n > best_n then best, best_n, hit = rule.role, n, first end
  end
  if best then return best, "keyword '" .. hit .. "'" end
  return "explorer", "no keyword matched; the default"
end

--- (role name, why). `roles` is a list of {name, description} that may be chosen.
function M.classify(task, roles)
  local lines, known = {}, {}
  for _, r in ipairs(roles) do
    lines[#lines + 1] = "- " .. r.name .. ": " .. (r.description or "")
    known[#known + 1] = r.name
  end
  local ok, resp = pcall(moss.llm.chat, {
    label = "dispatch",
    system = "You route tasks for a coding agent. Reply with exactly one role name from this list " ..
      "and nothing else:\n" .. table.concat(lines, "\n"),
    messages = { { role = "user", content = "Task: " .. task } },
    max_tokens = 16,
  })
  if not ok then
    local kind = moss.error_kind(resp)
    if kind == "config" or kind == "budget" or kind == "interrupted" then error(resp, 0) end
    local role, why = M.by_keywords(task)
    return role, why .. " (the classifier failed: " .. tostring(resp.message or resp) .. ")"
  end
  local answer = (resp.text or ""):lower():gsub("^%s+", ""):gsub("%s+$", "")
  local word = answer:match("^[%a_-]+")
  for _, name in ipairs(known) do
    if word == name or answer == name then return name, "classifier answered '" .. name .. "'" end
  end
  local role, why = M.by_keywords(task)
  return role, why .. " (the classifier's answer '" .. answer:sub(1, 40) .. "' was not a role)"
end

return M
