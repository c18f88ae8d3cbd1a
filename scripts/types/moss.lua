---@meta moss
-- LuaLS type annotations for the `moss` global. Editors that use lua-language-server
-- (VS Code's Lua extension, Neovim's lua_ls) read these through .luarc.json, so `moss.`
-- completes and calls are type-checked. This file is never executed.

---@class moss.Error
---@field kind string      # stable word: usage, config, not_found, ambiguous, denied, budget, llm, timeout, interrupted, internal
---@field message string   # "moss.ns.fn: what went wrong"
---@field where string     # "file.lua:LINE: " of the caller, or ""

---@class moss
---@field args string[]            # words after `moss @NAME` (host options removed)
---@field root string              # the project root (nearest .moss/ or .git/ above cwd)
---@field config table             # merged .moss/config.toml over ~/.config/moss/config.toml; every field
---@field options moss.Options     # host options given on the command line
---@field script string            # the name of the running script
---@field version string           # moss's version
moss = {}

---@class moss.Options
---@field provider? string
---@field model? string
---@field record? string
---@field replay? string
---@field script? string
---@field max_cost? number
---@field max_tokens? integer
---@field memory_mb? integer
---@field timeout? number
---@field allow_full? boolean
---@field verbose? boolean

--- A table that converts to a dict / JSON object even when empty (`{}` alone becomes a list).
---@param t? table
---@return table
function moss.dict(t) end

--- Raise an error with a `kind` that `moss.error_kind` and `err.kind` report.
---@param kind string
---@param message string
---@param level? integer  # 1 = the caller of moss.error (default)
function moss.error(kind, message, level) end

--- The kind of an error value caught with pcall: a moss error's kind, or "lua".
---@param err any
---@return string
function moss.error_kind(err) end

--- string.format, for brevity.
---@param fmt string
---@return string
function moss.fmt(fmt, ...) end

---@class moss.ui
moss.ui = {}

--- Print a message for people on stderr (stdout is for answers).
---@param text string
---@param opts? {style?: string}  # a rich style such as "bold red"
function moss.ui.print(text, opts) end

--- A one-line progress/status message on stderr.
---@param text string
function moss.ui.status(text) end

--- Whether stderr is an interactive terminal.
---@return boolean
function moss.ui.is_terminal() end
