// The embedded API is one import: `import Cloudlet` brings the value types (records, IDs, errors) too.
@_exported import CloudletCore
@_exported import CloudletModel

/// When a commit is acknowledged; see ``StoreConfiguration/durability``.
public typealias Durability = CloudletStorage.Durability

import CloudletStorage
