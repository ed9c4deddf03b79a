"""infersight.engine"""

__all__: list[str] = []
