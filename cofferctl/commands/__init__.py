"""cofferctl's commands, one module per group; cofferctl.cli wires them into the parser."""
