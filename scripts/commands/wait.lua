-- $(wait): do not conclude this turn (an answer in the same reply is set aside).
return {
  name = "wait",
  help = "wait — do not conclude this turn",
  run = function() return { hold = true } end,
}
