-- After the README's Neovim setup (loaded by -u): opens LSP_NOTE, as a user does, waits for
-- the server's diagnostics, prints them and the client's root as JSON lines, and quits
-- (1 on a failure). Neovim 0.7 and later.
local function out(value) io.stdout:write(vim.fn.json_encode(value) .. "\n") end
local function fail(message) out({ error = message }); vim.cmd("cquit 1") end

local ok, err = pcall(function()
  vim.cmd("edit " .. vim.fn.fnameescape(os.getenv("LSP_NOTE")))
  local buf = vim.api.nvim_get_current_buf()
  if not vim.wait(10000, function() return #vim.diagnostic.get(buf) > 0 end, 10) then
    fail("no diagnostics (filetype " .. vim.bo[buf].filetype .. ")")
  end
  local messages = {}
  for _, d in ipairs(vim.diagnostic.get(buf)) do table.insert(messages, d.message) end
  local roots = {}
  for _, client in pairs(vim.lsp.buf_get_clients(buf)) do
    table.insert(roots, client.config.root_dir)
  end
  out({ diagnostics = messages, roots = roots })
  vim.lsp.stop_client(vim.lsp.get_active_clients())
  vim.wait(5000, function() return #vim.lsp.get_active_clients() == 0 end, 10)
end)
if not ok then fail(tostring(err)) end
vim.cmd("qall!")
