"""The podman sandbox provider (``[sandbox] provider = "podman"``): no daemon, rootful as root and
rootless as a plain user (subuid/subgid ranges). :mod:`.provider` (``PROVIDER``), the CLI and the host's
facts (:mod:`.cli`), the boxes (:mod:`.box`), the image (:mod:`.image`), ``fte-shell sandbox doctor``
(:mod:`.doctor`)."""
