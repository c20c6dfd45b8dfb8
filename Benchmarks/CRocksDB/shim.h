/* RocksDB's C API (Debian librocksdb-dev). Used only by cloudlet-bench, as an anchor. */
#include <rocksdb/c.h>
