"""infersight.diagnose"""

__all__: list[str] = []
