# frozen_string_literal: true

# A forked child must never talk over its parent's sockets: it opens its own
# connections, and the parent keeps working on its own.
RSpec.describe "fork safety" do
  let(:server) { FerrolockTest.redis_server }
  let(:client) { Ferrolock::Client.new(url: server.url) }

  def connection_ids
    server.redis.call("CLIENT", "LIST").lines.map { |line| line[/\bid=(\d+)/, 1].to_i }
  end

  # Runs the block in a forked child; returns what it wrote to the pipe.
  def in_child(timeout: 20)
    reader, writer = IO.pipe
    pid = fork do
      reader.close
      writer.write(yield.to_s)
      writer.close
      exit!(0)
    rescue Exception => e # rubocop:disable Lint/RescueException
      warn "child failed: #{e.class}: #{e.message}"
      exit!(1)
    end
    writer.close
    output = reader.read
    _, status = Timeout.timeout(timeout) { Process.wait2(pid) }
    expect(status).to be_success, "the child process failed"
    output
  ensure
    reader&.close
  end

  it "gives the child its own connections" do
    # Warm several pooled connections in the parent.
    Array.new(4) { Thread.new { 20.times { client.call("ECHO", "parent") } } }.each(&:join)
    before_fork = connection_ids

    child_ids = in_child do
      Array.new(4) { Thread.new { Array.new(10) { client.call("CLIENT", "ID") } } }.flat_map(&:value).uniq.join(",")
    end.split(",").map(&:to_i)

    expect(child_ids).not_to be_empty
    expect(child_ids & before_fork).to be_empty
  end

  it "keeps the parent working while and after the child runs" do
    client.ping
    parent = Thread.new { Array.new(300) { |i| client.call("ECHO", "p#{i}") } }
    child = in_child do
      Array.new(300) { |i| client.call("ECHO", "c#{i}") }.each_with_index.all? { |v, i| v == "c#{i}" }
    end
    expect(child).to eq("true")
    expect(parent.value).to eq(Array.new(300) { |i| "p#{i}" })
    expect(client.call("ECHO", "after")).to eq("after")
  end

  it "lets the parent keep using the connection it had before the fork" do
    id_before = client.call("CLIENT", "ID")
    in_child { client.ping }
    expect(client.call("CLIENT", "ID")).to be_a(Integer)
    expect(connection_ids).to include(id_before)
  end
end
