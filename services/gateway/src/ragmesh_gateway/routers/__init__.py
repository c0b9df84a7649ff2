"""The HTTP API's routes by concern; app.py includes them in this order."""
