import Foundation

#if canImport(Glibc)
import Glibc
#endif

// cloudlet-bench: see BenchOptions.usage and Benchmarks/README.md.

func main() -> Int32 {
    let arguments = Array(CommandLine.arguments.dropFirst())
    // A child process of `scale`, started by the workload itself (not in --help).
    if arguments.first == ScaleChild.flag { return ScaleChild.main(Array(arguments.dropFirst())) }
    let options: BenchOptions
    do {
        options = try BenchOptions.parse(arguments)
    } catch {
        return fail(error)
    }
    if options.help {
        print(BenchOptions.usage)
        return 0
    }
    let groups: [[any Workload]]
    do {
        groups = try options.select(WorkloadCatalog.groups(quick: options.quick, sizes: options.sizes))
    } catch {
        return fail(error)
    }
    if options.list {
        print(WorkloadCatalog.listing(indent: ""))
        print("\nengines:\n  disk (anchor): the filesystem under --dir, appending to growing files")
        print("  disk-prewritten (anchor, fillsync* only): the same, overwriting a file written beforehand")
        for e in EngineRegistry.all { print("  \(e.name) (\(e.role.rawValue)): \(e.detail())") }
        return 0
    }
    if BuildInfo.isDebug { Console.error(BuildInfo.debugBanner) }

    let directory: BenchDirectory
    do {
        directory = try BenchDirectory(path: options.dir)
    } catch {
        return fail(error)
    }
    defer { directory.cleanUp() }

    let results: [BenchResult]
    do {
        results = try BenchRunner(directory: directory, runs: options.measuredRuns).run(groups)
    } catch {
        Console.progress(nil)
        return fail(error)
    }

    let machine = MachineInfo(dataPath: directory.path)
    let ran = Set(results.map(\.engine))
    let engines = EngineRegistry.all.filter { ran.contains($0.name) }
    if options.json {
        let report = BenchReport(
            buildConfiguration: BuildInfo.configuration, debugBuild: BuildInfo.isDebug, quick: options.quick,
            measuredRuns: options.measuredRuns, machine: machine,
            engines: Dictionary(uniqueKeysWithValues: engines.map { ($0.name, $0.detail()) }), results: results)
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        do {
            print(String(decoding: try encoder.encode(report), as: UTF8.self))
        } catch {
            return fail(error)
        }
    } else {
        print(
            "cloudlet-bench · \(BuildInfo.configuration) build · \(options.quick ? "quick" : "full") · "
                + "\(options.measuredRuns) runs + 1 warm-up · \(machine.date)")
        print("machine: \(machine.summary)")
        for e in engines { print("\(e.name): \(e.detail())") }
        print("data: \(directory.path)\(directory.isTemporary ? " (temporary)" : "")")
        print("")
        print(TablePrinter().render(results))
    }
    if BuildInfo.isDebug { Console.error(BuildInfo.debugBanner) }
    return 0
}

/// Reports `error` as `error: …` on stderr; returns the exit status for it.
func fail(_ error: any Error) -> Int32 {
    guard let e = error as? BenchError else {
        Console.error("error: \(error)")
        return 1
    }
    Console.error("error: \(e.message)")
    return e.exitStatus
}

exit(main())
