"""Fleet mode: several clawgate processes on one Redis share the work (docs/fleet.md).

Imported only when `[fleet] redis_url` is set (gateway/app.py), so single-process mode never
loads redis. The parts: connect.py (reach Redis, check its persistence), keys.py (names and
partitioning), leases.py (partition and singleton leases with fencing tokens), bus.py (the
MessageBus on Redis Streams), node.py (the process's place in the fleet, wired by the app).
"""
