"""infersight.telemetry"""

__all__: list[str] = []
