"""The test services themselves (tests/services.py): real redis-server and PostgreSQL processes."""

from __future__ import annotations

import psycopg
import redis

from tests.services import PostgresServer, RedisServer


def test_redis_answers_again_after_stop_and_start(redis_factory) -> None:
    server: RedisServer = redis_factory()
    client = redis.Redis.from_url(server.url, socket_timeout=2, socket_connect_timeout=2)
    client.set("key", "value")
    assert client.get("key") == b"value"

    server.stop()
    assert not server.ping()
    try:
        client.ping()
    except redis.ConnectionError:
        pass
    else:
        raise AssertionError("a stopped redis-server answered PING")

    server.start()
    assert server.url.endswith(f":{server.port}/0")
    assert client.ping()  # the same client, the same port
    assert client.get("key") is None  # no persistence: an outage loses the keys
    client.close()


def test_shared_redis_is_flushed_for_each_test(redis_server: RedisServer, redis_url: str) -> None:
    with redis.Redis.from_url(redis_url) as client:
        assert client.dbsize() == 0
        client.set("left-behind", "1")
    redis_server.flush()


def test_postgres_gives_each_test_a_fresh_database(postgres_server: PostgresServer, postgres_url: str) -> None:
    other = postgres_server.url_for("other")
    assert other != postgres_url
    with psycopg.connect(postgres_url) as a, psycopg.connect(other) as b:
        a.execute("CREATE TABLE only_here (x int)")
        assert a.execute("SELECT current_database()").fetchone()[0] == postgres_url.rsplit("/", 1)[1]
        found = b.execute("SELECT count(*) FROM pg_tables WHERE tablename = 'only_here'").fetchone()[0]
        assert found == 0
        assert a.execute("SHOW listen_addresses").fetchone()[0] == "127.0.0.1"
