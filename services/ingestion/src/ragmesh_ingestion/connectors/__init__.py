"""Connectors: folders and web sites synced into documents on a schedule (README, "Connectors").

base.py (what a source reports per item), folder.py and web.py (the two sources), engine.py (a run: documents,
item states, the report), sink.py (documents made as uploads are), tasks.py (the worker's Celery tasks), beat.py
(the Celery beat process)."""
