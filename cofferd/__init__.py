"""Coffer daemon: keeps a derived SQLite index of Markdown knowledge bases current."""

__version__ = "0.1.0"
