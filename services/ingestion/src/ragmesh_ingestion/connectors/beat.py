"""Celery beat for the connectors: `celery -A ragmesh_ingestion.connectors.beat beat --schedule <file>`.

One beat process per deployment (the chart's `connectors-beat`, replicas 1; the dev stack's `connectors-beat`):
every CONNECTORS_TICK_SECONDS (30) it sends the tick task to the ingestion queue, and the worker's tick queues a
run for each connector whose schedule is due (ragmesh_common.connectors). Beat itself needs only the broker
(REDIS_URL, REDIS_PASSWORD, REDIS_TLS_CA_FILE): it reads no database and signs nothing.
"""

from __future__ import annotations

from pydantic import Field

from ragmesh_common.config import ServiceSettings, settings_config
from ragmesh_common.connectors import configure_beat, tick_seconds
from ragmesh_common.ingestion import QUEUE, create_celery, redis_url
from ragmesh_common.logs import setup_logging


class BeatSettings(ServiceSettings):
    model_config = settings_config()

    redis_url: str = Field(validation_alias="REDIS_URL", repr=False)
    redis_password: str = Field("", validation_alias="REDIS_PASSWORD", repr=False)
    redis_tls_ca_file: str = Field("", validation_alias="REDIS_TLS_CA_FILE")


setup_logging("connectors-beat")
_settings = BeatSettings.from_env()
app = create_celery(redis_url(_settings.redis_url, _settings.redis_password, _settings.redis_tls_ca_file))
configure_beat(app, QUEUE, tick_seconds())
