-- Neovim's own LSP client on `cofferctl lsp` (Neovim 0.7 and later): opens the note
-- LSP_NOTE, waits for diagnostics, asks for the definition at LSP_LINE and LSP_CHARACTER
-- and for completion at LSP_COMPLETE_LINE and LSP_COMPLETE_CHARACTER, prints what it got
-- as JSON lines, and quits (1 on a failure).
--   COFFERCTL=... LSP_NOTE=... LSP_LINE=2 LSP_CHARACTER=6 nvim --headless --clean -u nvim_lsp.lua
local function out(value) io.stdout:write(vim.fn.json_encode(value) .. "\n") end
local function fail(message) out({ error = message }); vim.cmd("cquit 1") end

local ok, err = pcall(function()
  vim.cmd("edit " .. vim.fn.fnameescape(os.getenv("LSP_NOTE")))
  local buf = vim.api.nvim_get_current_buf()
  local client_id = vim.lsp.start_client({
    name = "coffer",
    cmd = { os.getenv("COFFERCTL"), "lsp" },
    root_dir = vim.fn.getcwd(),
  })
  if not client_id then fail("the client did not start") end
  vim.lsp.buf_attach_client(buf, client_id)

  if not vim.wait(10000, function() return #vim.diagnostic.get(buf) > 0 end, 10) then
    fail("no diagnostics")
  end
  local found = {}
  for _, d in ipairs(vim.diagnostic.get(buf)) do
    table.insert(found, { line = d.lnum, col = d.col, message = d.message })
  end
  out({ diagnostics = found })

  local params = {
    textDocument = { uri = vim.uri_from_bufnr(buf) },
    position = { line = tonumber(os.getenv("LSP_LINE")), character = tonumber(os.getenv("LSP_CHARACTER")) },
  }
  local answers = vim.lsp.buf_request_sync(buf, "textDocument/definition", params, 10000)
  if not answers then fail("no definition") end
  for _, answer in pairs(answers) do
    if answer.err then fail(vim.inspect(answer.err)) end
    local target = answer.result
    if target and target[1] then target = target[1] end
    out({ definition = target and { uri = target.uri, line = target.range.start.line } or vim.NIL })
  end

  local line = tonumber(os.getenv("LSP_COMPLETE_LINE"))
  local character = tonumber(os.getenv("LSP_COMPLETE_CHARACTER"))
  local completion = { textDocument = params.textDocument, position = { line = line, character = character } }
  answers = vim.lsp.buf_request_sync(buf, "textDocument/completion", completion, 10000)
  if not answers then fail("no completion") end
  for _, answer in pairs(answers) do
    if answer.err then fail(vim.inspect(answer.err)) end
    local labels = {}
    for _, item in ipairs(answer.result and (answer.result.items or answer.result) or {}) do
      table.insert(labels, item.label)
    end
    out({ completion = labels })
  end

  vim.lsp.stop_client(client_id)
  vim.wait(5000, function() return vim.lsp.get_client_by_id(client_id) == nil end, 10)
end)
if not ok then fail(tostring(err)) end
vim.cmd("qall!")
