"""How the store reaches S3: credentials and the process's clients (:mod:`.clients`), the guarded object calls every
request goes through (:mod:`.objects`: each key checked against the layout first) and the streaming multipart
upload on top of them (:mod:`.upload`). Knows nothing of manifests or commits."""
