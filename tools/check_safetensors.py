#!/usr/bin/python3
"""tools/check_safetensors.py: an independent (numpy-only) reader and writer of safetensors
files, to check ddplua's checkpoints against the format without the `safetensors` package.

    /usr/bin/python3 tools/check_safetensors.py FILE...      # validate, print each tensor
    /usr/bin/python3 tools/check_safetensors.py --write FILE  # write a sample file for ddpl.load

Validation follows the reference implementation: 8-byte little-endian header length, JSON
header (UTF-8, starting with '{'), known dtypes, data_offsets matching the shapes and tiling
the data section exactly. Exit status 1 on the first violation.
"""
import json
import struct
import sys

import numpy as np

DTYPES = {'F64': '<f8', 'F32': '<f4', 'F16': '<f2', 'BF16': '<u2', 'I64': '<i8', 'I32': '<i4',
          'U8': 'u1', 'BOOL': '?'}


def read(path):
    with open(path, 'rb') as f:
        data = f.read()
    if len(data) < 8:
        raise ValueError('shorter than 8 bytes')
    (n,) = struct.unpack('<Q', data[:8])
    if 8 + n > len(data):
        raise ValueError('header length %d beyond the file size %d' % (n, len(data)))
    text = data[8:8 + n].decode('utf-8')
    if not text.startswith('{'):
        raise ValueError('header does not start with {')
    header = json.loads(text)
    body = data[8 + n:]
    meta = header.pop('__metadata__', {})
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in meta.items()):
        raise ValueError('__metadata__ is not {str: str}')
    end = 0
    out = {}
    for name, e in sorted(header.items(), key=lambda kv: tuple(kv[1]['data_offsets'])):
        b, f = e['data_offsets']
        if b != end:
            raise ValueError('%s: data_offsets %s leave a gap or overlap' % (name, [b, f]))
        dt = np.dtype(DTYPES[e['dtype']])
        count = int(np.prod(e['shape'], dtype=np.int64))
        if f - b != count * dt.itemsize:
            raise ValueError('%s: %d bytes for shape %s' % (name, f - b, e['shape']))
        arr = np.frombuffer(body[b:f], dtype=dt).reshape(e['shape'])
        if e['dtype'] == 'BF16':
            arr = (arr.astype(np.uint32) << 16).view(np.float32)
        out[name] = (e['dtype'], arr)
        end = f
    if end != len(body):
        raise ValueError('data section has %d bytes, tensors cover %d' % (len(body), end))
    return out, meta


def write(path):
    tensors = {'weight': np.arange(6, dtype='<f4').reshape(2, 3) / 4,
               'steps': np.array([1, -2, 3], dtype='<i8'), 'flag': np.array(True)}
    header, blobs, off = {'__metadata__': {'format': 'pt'}}, [], 0
    codes = {np.dtype('<f4'): 'F32', np.dtype('<i8'): 'I64', np.dtype('?'): 'BOOL'}
    for name, arr in tensors.items():
        raw = arr.tobytes()
        header[name] = {'dtype': codes[arr.dtype], 'shape': list(arr.shape),
                        'data_offsets': [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    text = json.dumps(header).encode()
    text += b' ' * (-len(text) % 8)
    with open(path, 'wb') as f:
        f.write(struct.pack('<Q', len(text)) + text + b''.join(blobs))


def main():
    if len(sys.argv) == 3 and sys.argv[1] == '--write':
        write(sys.argv[2])
        return
    for path in sys.argv[1:]:
        try:
            tensors, meta = read(path)
        except (ValueError, KeyError, json.JSONDecodeError) as e:
            sys.exit('%s: %s' % (path, e))
        print('%s: %d tensors, metadata keys %s' % (path, len(tensors), sorted(meta)))
        for name, (code, arr) in tensors.items():
            print('  %s %s %s %s' % (name, code, list(arr.shape), arr.reshape(-1)[:6].tolist()))


if __name__ == '__main__':
    main()
