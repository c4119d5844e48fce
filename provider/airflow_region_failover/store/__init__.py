"""The BLOCKING result store on S3: a result partition committed atomically, checked for availability, read back,
released and swept. Its front door is :class:`~.result_store.ResultStore` (:mod:`.result_store`); the long form
of the protocol is the docs site's reference page on the store (``docs/reference/store.md``).

Rooms, each answering one question, lower ones never importing higher ones (the import contract,
``tests/unit/test_imports.py``):

* where every key goes — :mod:`.keys` (the one description of the key layout, and the only producer of keys);
* how S3 is reached — :mod:`.s3` (credentials and clients, the guarded object calls, the streaming upload);
* the protocol, which imports neither pyarrow nor pyspark: what a commit records — :mod:`.manifest`, and what a
  checkpoint of a checkpointed step records — :mod:`.checkpoint_manifest`; which attempt is the committed version
  — :mod:`.commit` (the commit / supersede protocol and the reader rule); how a body is stored once under the name
  of its hash, and whether what is stored there is that body — :mod:`.content`; can a partition be read again —
  :mod:`.availability`; does the server honour conditional writes, which prefix is this deployment's —
  :mod:`.deployment`; where the store lives and its settings — :mod:`.config`;
* when stored results are deleted — :mod:`.gc` (the sweeper, retention and holds, the shared objects' registry);
* how a DataFrame becomes Parquet objects and is read back — :mod:`.dataplane` (the writers, the reader, the
  write protocol's types, the JVM sources);
* the front door that puts them together — :mod:`.result_store`.

The faces the rest of the provider may import (the contract's ``FACES`` refuses any other ``store.*`` import from
outside the store): ``ResultStore`` and its records (:mod:`.result_store`, :mod:`.config`, :mod:`.availability`,
:mod:`.s3.clients`), the format (:mod:`.keys`, :mod:`.manifest`, :mod:`.checkpoint_manifest`), the guarded S3
objects (:mod:`.s3.objects`) for the decision logs and checkpoints, and the write types
(:mod:`.dataplane.types`) with the few writer and reader entry points the engines (``spark/``, ``checkpoint/``)
call. This package re-exports nothing: import a name from the module that answers its question. Errors are in
:mod:`airflow_region_failover.exceptions`.
"""
