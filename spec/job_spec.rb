# frozen_string_literal: true

require "active_job"

# Defined at top level: the model resolves names with Object.const_get.
class JobSpecJob < ActiveJob::Base
  def perform(*); end
end

JobSpecWorker = Class.new

# The one job model: which job a Sidekiq payload, an ActiveJob instance or an SQS body really is.
# Every middleware, hook and digest reads the ActiveJob wrapper through it.
RSpec.describe Ferrolock::Job do
  let(:wrapper) { "ActiveJob::QueueAdapters::SidekiqAdapter::JobWrapper" }

  describe ".from_sidekiq" do
    it "reads a plain payload: its class (loaded), args and jid; no job_id" do
      job = described_class.from_sidekiq({ "class" => "JobSpecWorker", "args" => [1, "a"], "jid" => "j1",
                                           "queue" => "q" })
      expect([job.job_class, job.class_name, job.arguments, job.jid, job.queue, job.job_id, job.active_job?])
        .to eq([JobSpecWorker, "JobSpecWorker", [1, "a"], "j1", "q", nil, false])
      expect(job.label).to eq("JobSpecWorker j1")
    end

    it "prefers the class the caller knows over the payload's" do
      job = described_class.from_sidekiq({ "class" => "Other", "args" => [] }, JobSpecWorker)
      expect(job.job_class).to eq(JobSpecWorker)
    end

    it "unwraps ActiveJob (Rails' and Sidekiq 8's wrapper): the wrapped class, serialized arguments, job_id" do
      [wrapper, "Sidekiq::ActiveJob::Wrapper"].each do |name|
        data = { "job_class" => "JobSpecJob", "job_id" => "aj-1", "arguments" => [{ "a" => 1 }] }
        job = described_class.from_sidekiq({ "class" => name, "wrapped" => "JobSpecJob", "args" => [data],
                                             "jid" => "j2" })
        expect([job.job_class, job.arguments, job.job_id, job.active_job?])
          .to eq([JobSpecJob, [{ "a" => 1 }], "aj-1", true])
        expect(job.label).to eq("JobSpecJob jid=j2 job_id=aj-1")
      end
    end

    it "names a class not loaded here by its String (no NameError), wrapped or not" do
      plain = described_class.from_sidekiq({ "class" => "NotLoaded::Here", "args" => [] })
      wrapped = described_class.from_sidekiq({ "class" => wrapper, "wrapped" => "Gone::Job", "args" => [{}] })
      expect([plain.job_class, wrapped.job_class, wrapped.arguments]).to eq(["NotLoaded::Here", "Gone::Job", []])
    end

    it "is no wrapper when 'wrapped' is missing or the class only looks like one" do
      expect(described_class.from_sidekiq({ "class" => wrapper, "args" => [1] }).active_job?).to be(false)
      utf16 = wrapper.encode("UTF-16LE")
      expect(described_class.from_sidekiq({ "class" => utf16, "wrapped" => "X", "args" => [] }).active_job?)
        .to be(false)
    end

    it "refuses garbage with a TypeError naming the part" do
      expect { described_class.from_sidekiq([1]) }.to raise_error(TypeError, /job must be a Hash/)
      expect { described_class.from_sidekiq({ "class" => 5, "args" => [] }).job_class }
        .to raise_error(TypeError, /job class must be a Class, String or Symbol, got 5/)
    end
  end

  it ".from_active_job: the instance's class, arguments, job_id and queue" do
    instance = JobSpecJob.new(1, b: 2)
    job = described_class.from_active_job(instance)
    expect([job.job_class, job.arguments, job.job_id, job.queue, job.active_job?])
      .to eq([JobSpecJob, [1, { b: 2 }], instance.job_id, "default", true])
  end

  describe ".from_sqs" do
    let(:aj_wrapper) { Class.new { def self.name = "Shoryuken::ActiveJob::JobWrapper" }.new }

    it "reads Shoryuken's ActiveJob wrapper body: job_class, job_id, arguments" do
      body = { "job_class" => "JobSpecJob", "job_id" => "aj-2", "arguments" => [3], "queue_name" => "q" }
      job = described_class.from_sqs(aj_wrapper, body)
      expect([job.job_class, job.job_id, job.arguments, job.queue, job.active_job?])
        .to eq([JobSpecJob, "aj-2", [3], "q", true])
    end

    it "is the worker itself for a plain worker or a body that is no serialized job" do
      expect(described_class.from_sqs(JobSpecWorker.new, { "job_class" => "JobSpecJob" }).job_class)
        .to eq(JobSpecWorker)
      expect(described_class.from_sqs(aj_wrapper, "text").class_name).to eq("Shoryuken::ActiveJob::JobWrapper")
      expect(described_class.from_sqs(aj_wrapper, "text").job_id).to be_nil
    end
  end
end
