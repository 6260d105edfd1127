"""The bubblewrap sandbox provider (``[sandbox] provider = "bwrap"``): no daemon, no root, no registry.

:mod:`.provider` (``PROVIDER``, gc, doctor), the box and its shells (:mod:`.box`), the root file system
exported once from the sandbox image and cached by content (:mod:`.rootfs`), and the limits a host lets
an unprivileged user set: cgroups when one is delegated, else rlimits (:mod:`.limits`).
"""
