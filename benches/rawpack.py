"""Pieces of hand-made packs (gitformat-pack(5)) for the benches that POST
raw receive-pack requests: object ids, entry headers, delta size varints
and OFS_DELTA distances. Stdlib only."""
import hashlib


def oid(kind, data):
    """The SHA-1 object id of `data` as a git object of `kind` (bytes)."""
    h = hashlib.sha1(b"%s %d\0" % (kind, len(data)))
    h.update(data)
    return h.digest()


def header(t, n):
    """A pack entry header: type `t`, size `n`."""
    b = [(t << 4) | (n & 15)]
    n >>= 4
    while n:
        b[-1] |= 0x80
        b.append(n & 127)
        n >>= 7
    return bytes(b)


def varint(n):
    """A delta header's size: little-endian base-128."""
    out = bytearray()
    while True:
        b = n & 127
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def ofs(dist):
    """An OFS_DELTA's distance back to its base."""
    b = [dist & 127]
    dist >>= 7
    while dist:
        dist -= 1
        b.append(0x80 | (dist & 127))
        dist >>= 7
    return bytes(reversed(b))


def pkt(b):
    """A pkt-line."""
    return b"%04x" % (len(b) + 4) + b


def push_raw(port, repo, tip, pack):
    """POSTs `pack` to `repo`'s receive-pack on 127.0.0.1:`port` as the
    creation of refs/heads/main at `tip` (hex); asserts `unpack ok`."""
    import http.client
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=3600)
    c.request("POST", "/%s.git/git-receive-pack" % repo,
              pkt(b"%s %s refs/heads/main\0report-status" % (b"0" * 40, tip.encode())) + b"0000" + bytes(pack),
              {"Content-Type": "application/x-git-receive-pack-request"})
    r = c.getresponse()
    answer = r.read()
    assert r.status == 200 and b"unpack ok" in answer, answer[:300]
