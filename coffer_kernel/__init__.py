"""What the daemon and its clients share, standard library only: where things live, the
Markdown grammar and Obsidian's link rules, which files may be added, durations, the
version. It imports neither `cofferd` nor `cofferctl`; both import it."""

__version__ = "0.1.0"
