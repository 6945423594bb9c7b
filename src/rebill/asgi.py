"""The ASGI entry point uvicorn imports: ``rebill.asgi:app`` (settings from the environment)."""

from rebill.app import create_app

app = create_app()
