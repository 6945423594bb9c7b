"""Charges (see the issue; endpoints land here)."""

from ..routing import Endpoints

endpoints = Endpoints()
