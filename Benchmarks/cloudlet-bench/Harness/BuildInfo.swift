/// How this binary was built. Numbers from a debug build say nothing about the engines.
enum BuildInfo {
    #if DEBUG
    static let isDebug = true
    #else
    static let isDebug = false
    #endif

    static let configuration = isDebug ? "debug" : "release"

    static let debugBanner = """
        ************************************************************************
        *  DEBUG BUILD: these numbers are meaningless. Run a release build:     *
        *      swift run -c release cloudlet-bench                             *
        ************************************************************************
        """
}
