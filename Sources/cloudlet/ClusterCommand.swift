import CloudletCluster
import CloudletCommandLine
import CloudletWire
import Foundation

/// `cloudlet cluster status`: a node's view of its cluster.
enum ClusterCommand {
    static let help = """
        USAGE: cloudlet cluster status [--url URL] [--json]

        Asks a node of a cluster (`cloudlet serve --cluster …`) for its view: the nodes and their URLs, and for
        each replicated log (the data partitions and the catalog) its leader and epoch, this node's role, and
        every replica's published durable LSN and lag behind the leader (a replica whose lease lapsed is "down").

        OPTIONS:
          --url URL   the node to ask (default http://127.0.0.1:8080)
          --json      the node's answer as JSON
        """

    static func run(_ args: [String]) async throws {
        guard let sub = args.first, sub != "--help", sub != "-h" else {
            print(help)
            if args.isEmpty { throw UsageError(message: "cluster needs a subcommand: status") }
            return
        }
        guard sub == "status" else { throw UsageError(message: "unknown cluster subcommand '\(sub)'; see `cloudlet cluster --help`") }
        let o = try CommandLineOptions(Array(args.dropFirst()), valued: ["--url"], flags: ["--json"], help: help)
        let status = try await ClusterStatusClient.fetch(url: o["--url"] ?? "http://127.0.0.1:8080")
        if o.has("--json") {
            print(status.serialized())
            return
        }
        print(render(status))
    }

    static func render(_ s: JSONValue) -> String {
        var lines: [String] = []
        let name = s["cluster"]?.stringValue ?? "?"
        lines.append("cluster \(name), seen from \(s["node"]?.stringValue ?? "?") (ack \(s["ack"]?.stringValue ?? "?"))")
        for n in s["nodes"]?.arrayValue ?? [] {
            lines.append("  node \(n["node"]?.stringValue ?? "?")  \(n["url"]?.stringValue ?? "")")
        }
        for p in s["partitions"]?.arrayValue ?? [] {
            let log = p["partition"]?.stringValue ?? "partition \(p["partition"]?.int64Value ?? -1)"
            let leader = p["leader"]?.stringValue.map { "leader \($0), epoch \(p["epoch"]?.int64Value ?? 0)" } ?? "no leader"
            lines.append("\(log): \(leader); here \(p["role"]?.stringValue ?? "?"), durable LSN \(p["durableLSN"]?.int64Value ?? 0)")
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
