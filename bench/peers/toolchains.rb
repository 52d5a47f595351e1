# frozen_string_literal: true

require "digest"
require "fileutils"
require "open3"

module PeersBench
  # Installs each language's peer libraries under tmp/peers/ (gitignored; nothing system-wide),
  # once: a step reruns only when its pinned manifest changed. Each #prepare returns the command
  # that starts a driver (argv prefix + env), or raises Unavailable with a one-line reason.
  module Toolchains
    Unavailable = Class.new(StandardError)
    Driver = Struct.new(:argv, :env)

    ROOT = File.expand_path("../..", __dir__)
    PEERS = File.join(ROOT, "bench", "peers")
    WORK = File.join(ROOT, "tmp", "peers")

    module_function

    # A venv with the pins of bench/peers/python/requirements.txt.
    def python
      requirements = File.join(PEERS, "python", "requirements.txt")
      venv = File.join(WORK, "venv")
      python = File.join(venv, "bin", "python")
      need("python3")
      once("python", requirements) do
        run("python venv", "python3", "-m", "venv", venv) unless File.executable?(python)
        run("pip install", python, "-m", "pip", "install", "-q", "-r", requirements)
      end
      Driver.new([python, File.join(PEERS, "python", "driver.py")], {})
    end

    # node_modules from bench/peers/node/package.json (exact versions), in tmp/peers/node.
    def node
      manifest = File.join(PEERS, "node", "package.json")
      dir = File.join(WORK, "node")
      need("node")
      need("npm")
      once("node", manifest) do
        FileUtils.mkdir_p(dir)
        FileUtils.cp(manifest, dir)
        run("npm install", "npm", "install", "--no-audit", "--no-fund", "--loglevel=error", chdir: dir)
      end
      Driver.new(["node", File.join(PEERS, "node", "driver.js")],
                 { "NODE_PATH" => File.join(dir, "node_modules") })
    end

    # The rslock driver crate (its own workspace) built into tmp/peers/rust-target; cargo itself
    # decides whether anything changed.
    def rust
      manifest = File.join(PEERS, "rust", "Cargo.toml")
      target = File.join(WORK, "rust-target")
      need("cargo")
      run("cargo build", { "CARGO_TARGET_DIR" => target },
          "cargo", "build", "--release", "--quiet", "--manifest-path", manifest)
      Driver.new([File.join(target, "release", "ferrolock-peer-rslock")], {})
    end

    def need(tool)
      found = ENV.fetch("PATH", "").split(File::PATH_SEPARATOR).any? do |dir|
        File.executable?(File.join(dir, tool))
      end
      raise Unavailable, "#{tool} not found" unless found
    end

    # Runs the block unless it already ran for this manifest's content (a stamp file).
    def once(name, manifest, &block)
      stamp = File.join(WORK, ".#{name}.stamp")
      digest = Digest::SHA256.file(manifest).hexdigest
      return if File.exist?(stamp) && File.read(stamp) == digest

      FileUtils.mkdir_p(WORK)
      block.call
      File.write(stamp, digest)
    end

    # Output goes to tmp/peers/setup.log; a failure becomes Unavailable with its last line.
    def run(step, *command, chdir: ROOT)
      FileUtils.mkdir_p(WORK)
      output, status = Open3.capture2e(*command, chdir: chdir)
      File.write(File.join(WORK, "setup.log"), "$ #{command.grep(String).join(" ")}\n#{output}\n", mode: "a")
      return if status.success?

      last = output.lines.map(&:strip).reject(&:empty?).last || "exit #{status.exitstatus}"
      raise Unavailable, "#{step} failed: #{last} (see tmp/peers/setup.log)"
    end
  end
end
