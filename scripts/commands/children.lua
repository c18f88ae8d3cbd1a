-- $(children): the child agents of this session, their state and turn.
return {
  name = "children",
  help = "children — list your child agents and their state",
  access = "read-only",
  tool = true,
  run = function(ctx)
    local S = ctx.S
    if not S.children or #S.children == 0 then return "no child agents" end
    local lines = {}
    for _, c in ipairs(S.children) do
      local ok, i = pcall(moss.agents.info, c.id)
      local status = ok and i.status or (c.delivered and "collected" or "unknown")
      local turn = ok and i.turn or "?"
      local copy = ""
      if c.isolated then
        local iso = ok and i.isolated or {}
        copy = c.merged and " [isolated: merged]" or c.discarded and " [isolated: dropped]" or
          (" [isolated: %s]"):format(iso.changed and iso.changed > 0 and (iso.changed .. " file(s) changed, not merged")
            or "own copy")
      end
      lines[#lines + 1] = ("%s  %-10s %-9s turn %s%s%s  %s"):format(c.id, c.role or "?", status, tostring(turn),
        c.delivered and " (collected)" or "", copy, (c.task or ""):gsub("%s+", " "):sub(1, 80))
    end
    return table.concat(lines, "\n")
  end,
}
