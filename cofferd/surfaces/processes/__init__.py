"""The entry points of every process Coffer starts, each run by the one worker pool
(infrastructure.workers.pool) and speaking its frames (infrastructure.workers.frames):
`prepare_main` (documents for the index), `convert_main` (other formats to Markdown),
`model_main` (the bundled embedding model). Each is the composition root of its process:
it imports what its work needs and nothing of the daemon's serving side."""
