"""Coffer daemon: keeps a derived SQLite index of Markdown knowledge bases current."""
