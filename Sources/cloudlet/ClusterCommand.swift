import CloudletCluster
import CloudletCommandLine
import CloudletReplication
import CloudletWire
import Foundation

/// `cloudlet cluster status`: a node's view of its cluster.
enum ClusterCommand {
    static let help = """
        USAGE: cloudlet cluster status [--url URL] [--json]
               cloudlet cluster drain NODE [--force] [--etcd URL] [--cluster-name NAME]
               cloudlet cluster undrain NODE [--etcd URL] [--cluster-name NAME]
               cloudlet cluster promote NODE|--none [--etcd URL] [--cluster-name NAME]
               cloudlet cluster add NODE [--etcd URL] [--cluster-name NAME] [--json]
               cloudlet cluster remove NODE [--etcd URL] [--cluster-name NAME] [--json]

        status   asks a node of a cluster (`cloudlet serve --cluster …`) for its view: the nodes and their URLs, and
                 for each replicated log (the data partitions and the catalog) its leader and epoch, this node's
                 role, and every replica's published durable LSN and lag behind the leader (a replica whose lease
                 lapsed is "down").
        drain    NODE stops leading: it hands its partitions over to another replica and does not campaign while
                 another undrained replica is live (it still replicates and counts towards quorum). For maintenance:
                 drain, wait until `status` shows another leader, then stop the node. Refuses to drain the last
                 undrained replica unless --force.
        undrain  NODE may lead again.
        promote  NODE becomes the preferred leader: the leader hands over as soon as NODE has caught up, and the
                 others do not campaign while NODE is live. `--none` removes the preference.
        add      puts NODE in the replica set: a node started with an empty store (`cloudlet serve --cluster …
                 --node NODE`) that is not a replica registers and waits; once added it copies the leader's files
                 and tails like any replica (watch it catch up in `status`). It counts towards the majority at once,
                 so the live replicas with it must be a majority of the new set. To replace a dead replica: remove
                 it, then add the new node. One change at a time: asks to retry while the previous one has not
                 settled.
        remove   takes NODE, a replica that is gone for good (its disk lost, the machine retired), out of the replica
                 set: it no longer counts towards the majority that elects leaders and acknowledges writes, nor holds
                 back compaction. Refused for a live node (stop it first; its lease lapses within the lease TTL), the
                 last replica, or when the replicas left would not have a live majority; asks to retry while the
                 previous removal has not settled (every live node applied it, and each partition's leader heard from a
                 majority of the new set). One node at a time. A removed node refuses to start again (with its old
                 store; empty, it may be added again).
        Preferences live in etcd and never leave a partition without a leader: after two lease TTLs without one,
        any replica campaigns. Writes in flight during a handover get SERVICE_UNAVAILABLE (retry them).

        OPTIONS:
          --url URL            the node to ask (default http://127.0.0.1:8080)
          --etcd URL           etcd's client URL (default etcd://127.0.0.1:2379)
          --cluster-name NAME  the cluster's key prefix in etcd (default cloudlet)
          --force              drain even the last undrained replica
          --json               machine-readable output
        """

    static func run(_ args: [String]) async throws {
        guard let sub = args.first, sub != "--help", sub != "-h" else {
            print(help)
            if args.isEmpty { throw UsageError(message: "cluster needs a subcommand: status, drain, undrain, promote, add or remove") }
            return
        }
        let rest = Array(args.dropFirst())
        switch sub {
        case "status": try await status(rest)
        case "drain", "undrain", "promote": try await steer(sub, rest)
        case "add", "remove": try await change(sub, rest)
        default: throw UsageError(message: "unknown cluster subcommand '\(sub)'; see `cloudlet cluster --help`")
        }
    }

    static func status(_ args: [String]) async throws {
        let o = try CommandLineOptions(args, valued: ["--url"], flags: ["--json"], help: help)
        let status = try await ClusterStatusClient.fetch(url: o["--url"] ?? "http://127.0.0.1:8080")
        if o.has("--json") {
            print(status.serialized())
            return
        }
        print(render(status))
    }

    /// drain / undrain / promote: writes the preference to etcd and prints the preferences now in force.
    static func steer(_ sub: String, _ args: [String]) async throws {
        let o = try CommandLineOptions(
            args, valued: ["--etcd", "--cluster-name"], flags: ["--json", "--force", "--none"], positional: true, help: help)
        let admin = ClusterAdmin(etcd: o["--etcd"] ?? "etcd://127.0.0.1:2379", name: o["--cluster-name"] ?? "cloudlet")
        let node = o.positional.first.map(NodeID.init)
        if o.positional.count > 1 { throw UsageError(message: "cluster \(sub) takes one node, not \(o.positional.count)") }
        if node == nil && !(sub == "promote" && o.has("--none")) {
            throw UsageError(message: "cluster \(sub) needs a node name\(sub == "promote" ? " (or --none)" : "")")
        }
        switch sub {
        case "drain": try await admin.drain(node!, force: o.has("--force"))
        case "undrain": try await admin.undrain(node!)
        default: try await admin.promote(o.has("--none") ? nil : node)
        }
        let now = try await admin.preferences()
        let drained = now.drained.map(\.name).sorted()
        if o.has("--json") {
            let json: JSONValue = .members([
                "drained": .array(drained.map { .string($0) }), "preferredLeader": now.preferred.map { .string($0.name) },
            ])
            print(json.serialized())
        } else {
            print("drained: \(drained.isEmpty ? "none" : drained.joined(separator: ", ")); preferred leader: \(now.preferred?.name ?? "none")")
        }
    }

    /// remove: takes a dead replica out of the replica set in etcd and prints the set left.
    /// add / remove: changes the replica set in etcd and prints the set now in force.
    static func change(_ sub: String, _ args: [String]) async throws {
        let o = try CommandLineOptions(args, valued: ["--etcd", "--cluster-name"], flags: ["--json"], positional: true, help: help)
        guard o.positional.count == 1 else {
            throw UsageError(message: "cluster \(sub) takes one node, not \(o.positional.count)")
        }
        let node = NodeID(o.positional[0])
        let admin = ClusterAdmin(etcd: o["--etcd"] ?? "etcd://127.0.0.1:2379", name: o["--cluster-name"] ?? "cloudlet")
        let replicas = sub == "add" ? try await admin.add(node) : try await admin.remove(node)
        let done = sub == "add" ? "added" : "removed"
        if o.has("--json") {
            print(JSONValue.members([done: .string(node.name), "replicas": .array(replicas.map { .string($0.name) })]).serialized())
        } else {
            print("\(done) \(node.name); replicas: \(replicas.map(\.name).joined(separator: ", "))")
        }
    }

    static func render(_ s: JSONValue) -> String {
        var lines: [String] = []
        let name = s["cluster"]?.stringValue ?? "?"
        lines.append("cluster \(name), seen from \(s["node"]?.stringValue ?? "?") (ack \(s["ack"]?.stringValue ?? "?"))")
        let drained = (s["drained"]?.arrayValue ?? []).compactMap(\.stringValue)
        if !drained.isEmpty || s["preferredLeader"]?.stringValue != nil {
            lines.append("  drained: \(drained.isEmpty ? "none" : drained.joined(separator: ", ")); preferred leader: \(s["preferredLeader"]?.stringValue ?? "none")")
        }
        for n in s["nodes"]?.arrayValue ?? [] {
            lines.append("  node \(n["node"]?.stringValue ?? "?")  \(n["url"]?.stringValue ?? "")")
        }
        for p in s["partitions"]?.arrayValue ?? [] {
            let log = p["partition"]?.stringValue ?? "partition \(p["partition"]?.int64Value ?? -1)"
            let leader = p["leader"]?.stringValue.map { "leader \($0), epoch \(p["epoch"]?.int64Value ?? 0)" } ?? "no leader"
            lines.append(
                "\(log): \(leader); here \(p["role"]?.stringValue ?? "?"), durable LSN \(p["durableLSN"]?.int64Value ?? 0), "
                    + "compaction horizon \(p["compactionHorizon"]?.int64Value ?? 0)")
            for r in p["replicas"]?.arrayValue ?? [] {
                let node = (r["node"]?.stringValue ?? "?").padding(toLength: 8, withPad: " ", startingAt: 0)
                if r["live"]?.boolValue == true {
                    lines.append("  \(node) durable LSN \(r["durableLSN"]?.int64Value ?? 0), lag \(r["lag"]?.int64Value.map(String.init) ?? "?")")
                } else {
                    lines.append("  \(node) down")
                }
            }
        }
        return lines.joined(separator: "\n")
    }
}
