"""crawler: a recursive website link checker whose frontier lives on disk."""

__version__ = "0.1.0"
