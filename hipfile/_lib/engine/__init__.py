"""The stream-ordered parallel engine, compiled: ``cengine`` (the C threads
and staging of ``src/``), ``device`` (what the engine needs of each device's
runtime: flags, streams, copies, settings), ``ops`` (threads, rings, parked
operations), ``handle`` (:class:`StreamIOHandle`), ``plan`` (a submission
planned) and ``submit`` (the entry points, which carry a plan out)."""
