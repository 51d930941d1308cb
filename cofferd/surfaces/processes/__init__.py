"""The preparing worker's entry point, `prepare_main` (documents made ready for the index).
It runs application code (application.reading.preparation), so it lives here, above the
application, and the composition root hands it to its pool (infrastructure.workers.pool)
with its own reply allow-list. The converter's and the bundled model's entry points live
with their families (infrastructure.conversion.convert_main, infrastructure.models.model_main).
Each is the composition root of its process: it imports what its work needs and nothing
of the daemon's serving side."""
