"""The one exception family perfmodel raises for bad input (the CLI prints its message)."""


class PerfmodelError(ValueError):
    """Bad input to perfmodel: a shape, a device, a dtype or a data file."""
