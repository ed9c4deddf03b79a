"""infersight.gateway"""

__all__: list[str] = []
