"""The ASGI entry point uvicorn imports: ``rebill.asgi:app`` (settings from the environment)."""

from rebill import heap
from rebill.app import create_app

app = create_app()
heap.freeze()  # what the process built lives as long as it (heap.py)
