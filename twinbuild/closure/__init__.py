"""``twinbuild lock``: the lock of every image's whole closure (pins/lock/), and its checks."""
