"""`cofferctl lsp`: a language server over stdio that asks cofferd (it keeps no index)."""
