"""Kafka's broker setting names that raygroups has no use for, so that a real server.properties is
accepted with a warning for each rather than refused at its first line (process.roles, node.id, ...).

Taken from Kafka's ConfigDef definitions (KafkaConfig and the configs it gathers: server, socket
server, log, raft, group and share coordinators, transactions, security, quotas, ZooKeeper for older
files); a name in neither this list nor raygroups' SETTINGS is still an error.
"""

from __future__ import annotations

# Families whose names embed a listener or mechanism (listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config).
KAFKA_PREFIXES = ("listener.name.", "ssl.", "sasl.", "remote.log.", "log.cleaner.", "zookeeper.")

KAFKA_BROKER_SETTINGS = frozenset("""
    allow.everyone.if.no.acl.found alter.config.policy.class.name
    alter.log.dirs.replication.quota.window.num alter.log.dirs.replication.quota.window.size.seconds
    authorizer.class.name auto.include.jmx.reporter auto.leader.rebalance.enable background.threads
    broker.heartbeat.interval.ms broker.id broker.id.generation.enable broker.rack
    broker.session.timeout.ms cleanup.policy client.quota.callback.class compression.gzip.level
    compression.lz4.level compression.type compression.zstd.level config.providers
    connection.failed.authentication.delay.ms connections.max.idle.ms connections.max.reauth.ms
    consumer.heartbeat.interval.ms consumer.session.timeout.ms control.plane.listener.name
    controlled.shutdown.enable controlled.shutdown.max.retries controlled.shutdown.retry.backoff.ms
    controller.listener.names controller.quorum.append.linger.ms controller.quorum.bootstrap.servers
    controller.quorum.election.backoff.max.ms controller.quorum.election.timeout.ms
    controller.quorum.fetch.timeout.ms controller.quorum.voters controller.quota.window.num
    controller.quota.window.size.seconds controller.socket.timeout.ms create.topic.policy.class.name
    default.replication.factor delegation.token.expiry.check.interval.ms
    delegation.token.expiry.time.ms delegation.token.max.lifetime.ms delegation.token.secret.key
    delete.records.purgatory.purge.interval.requests delete.retention.ms early.start.listeners
    eligible.leader.replicas.enable fetch.max.bytes fetch.purgatory.purge.interval.requests
    file.delete.delay.ms flush.messages flush.ms follower.replication.throttled.rate
    follower.replication.throttled.replicas group.consumer.assignors
    group.consumer.heartbeat.interval.ms group.consumer.max.heartbeat.interval.ms
    group.consumer.max.session.timeout.ms group.consumer.max.size group.consumer.migration.policy
    group.consumer.min.heartbeat.interval.ms group.consumer.min.session.timeout.ms
    group.consumer.session.timeout.ms group.coordinator.append.linger.ms
    group.coordinator.new.enable group.coordinator.rebalance.protocols group.coordinator.threads
    group.share.assignors group.share.enable group.share.max.delivery.count.limit
    group.share.max.groups group.share.max.heartbeat.interval.ms
    group.share.max.record.lock.duration.ms group.share.max.session.timeout.ms
    group.share.min.delivery.count.limit group.share.min.heartbeat.interval.ms
    group.share.min.record.lock.duration.ms group.share.min.session.timeout.ms
    group.share.persister.class.name index.interval.bytes initial.broker.registration.timeout.ms
    inter.broker.listener.name inter.broker.protocol.version kafka.metrics.polling.interval.secs
    kafka.metrics.reporters leader.imbalance.check.interval.seconds
    leader.imbalance.per.broker.percentage leader.replication.throttled.rate
    leader.replication.throttled.replicas local.retention.bytes local.retention.ms
    log.cleaner.backoff.ms log.cleaner.dedupe.buffer.size log.cleaner.delete.retention.ms
    log.cleaner.enable log.cleaner.io.buffer.load.factor log.cleaner.io.buffer.size
    log.cleaner.io.max.bytes.per.second log.cleaner.max.compaction.lag.ms
    log.cleaner.min.cleanable.ratio log.cleaner.min.compaction.lag.ms log.cleaner.threads
    log.cleanup.policy log.compression.gzip.level log.compression.type log.compression.zstd.level
    log.dir log.dir.failure.timeout.ms log.dirs log.file.delete.delay.ms log.flush.interval.messages
    log.flush.interval.ms log.flush.messages log.flush.ms log.flush.offset.checkpoint.interval.ms
    log.flush.scheduler.interval.ms log.flush.start.offset.checkpoint.interval.ms
    log.index.interval.bytes log.initial.task.delay.ms log.local.retention.bytes
    log.local.retention.ms log.message.downconversion.enable log.message.format.version
    log.message.timestamp.after.max.ms log.message.timestamp.before.max.ms
    log.message.timestamp.difference.max.ms log.message.timestamp.type log.min.insync.replicas
    log.preallocate log.retention.bytes log.retention.check.interval.ms log.retention.hours
    log.retention.minutes log.retention.ms log.roll.hours log.roll.jitter.hours log.segment.bytes
    log.segment.index.bytes log.segment.jitter.ms log.segment.ms log.unclean.leader.election.enable
    max.compaction.lag.ms max.connection.creation.rate max.connections.per.ip.overrides
    max.incremental.fetch.session.cache.slots max.message.bytes max.request.partition.size.limit
    message.downconversion.enable message.format.version message.timestamp.after.max.ms
    message.timestamp.before.max.ms message.timestamp.difference.max.ms message.timestamp.type
    metadata.log.dir metadata.log.max.record.bytes.between.snapshots
    metadata.log.max.snapshot.interval.ms metadata.log.segment.bytes metadata.log.segment.min.bytes
    metadata.log.segment.ms metadata.max.idle.interval.ms metadata.max.retention.bytes
    metadata.max.retention.ms metric.reporters metrics.num.samples metrics.recording.level
    metrics.sample.window.ms min.cleanable.dirty.ratio min.compaction.lag.ms min.insync.replicas
    node.id num.io.threads num.network.threads num.recovery.threads.per.data.dir
    num.replica.alter.log.dirs.threads num.replica.fetchers
    offsets.load.buffer.size offsets.topic.compression.codec
    offsets.topic.segment.bytes password.encoder.cipher.algorithm password.encoder.iterations
    password.encoder.key.length password.encoder.keyfactory.algorithm password.encoder.old.secret
    password.encoder.secret principal.builder.class process.roles
    producer.id.expiration.check.interval.ms producer.id.expiration.ms
    producer.purgatory.purge.interval.requests queued.max.requests quota.window.num
    quota.window.size.seconds remote.log.copy.disable remote.log.delete.on.disable
    remote.log.storage.system.enable remote.storage.enable
    replica.alter.log.dirs.io.max.bytes.per.second replica.fetch.backoff.ms replica.fetch.max.bytes
    replica.fetch.min.bytes replica.fetch.response.max.bytes replica.fetch.wait.max.ms
    replica.high.watermark.checkpoint.interval.ms replica.lag.time.max.ms replica.selector.class
    replica.socket.receive.buffer.bytes replica.socket.timeout.ms replication.quota.window.num
    replication.quota.window.size.seconds reserved.broker.max.id retention.bytes retention.ms
    sasl.jaas.config sasl.kerberos.principal.to.local.rules sasl.kerberos.service.name
    sasl.mechanism.controller.protocol sasl.mechanism.inter.broker.protocol
    sasl.server.callback.handler.class sasl.server.max.receive.size security.inter.broker.protocol
    security.providers segment.bytes segment.index.bytes segment.jitter.ms segment.ms
    server.max.startup.time.ms share.coordinator.append.linger.ms share.coordinator.load.buffer.size
    share.coordinator.state.topic.compression.codec share.coordinator.state.topic.min.isr
    share.coordinator.state.topic.prune.interval.ms
    share.coordinator.state.topic.segment.bytes share.coordinator.threads
    share.fetch.max.fetch.records
    share.fetch.purgatory.purge.interval.requests share.heartbeat.interval.ms
    share.record.lock.duration.ms share.session.timeout.ms socket.listen.backlog.size
    socket.receive.buffer.bytes socket.send.buffer.bytes ssl.allow.dn.changes ssl.allow.san.changes
    ssl.cipher.suites ssl.enabled.protocols ssl.endpoint.identification.algorithm
    ssl.engine.factory.class ssl.keymanager.algorithm ssl.keystore.password
    ssl.principal.mapping.rules ssl.protocol ssl.provider ssl.secure.random.implementation
    ssl.trustmanager.algorithm ssl.truststore.password telemetry.max.bytes
    transaction.abort.timed.out.transaction.cleanup.interval.ms transaction.max.timeout.ms
    transaction.partition.verification.enable
    transaction.remove.expired.transaction.cleanup.interval.ms
    transaction.state.log.load.buffer.size transaction.state.log.min.isr
    transaction.state.log.num.partitions transaction.state.log.replication.factor
    transaction.state.log.segment.bytes transactional.id.expiration.ms
    unclean.leader.election.enable unclean.leader.election.interval.ms unstable.api.versions.enable
    unstable.feature.versions.enable zookeeper.connect zookeeper.connection.timeout.ms
    zookeeper.max.in.flight.requests zookeeper.metadata.migration.enable
    zookeeper.metadata.migration.min.batch.size zookeeper.session.timeout.ms zookeeper.set.acl
    zookeeper.ssl.cipher.suites zookeeper.ssl.client.enable zookeeper.ssl.crl.enable
    zookeeper.ssl.enabled.protocols zookeeper.ssl.endpoint.identification.algorithm
    zookeeper.ssl.keystore.location zookeeper.ssl.keystore.password zookeeper.ssl.keystore.type
    zookeeper.ssl.ocsp.enable zookeeper.ssl.protocol zookeeper.ssl.truststore.location
    zookeeper.ssl.truststore.password zookeeper.ssl.truststore.type
""".split())


def is_kafka_setting(name: str) -> bool:
    return name in KAFKA_BROKER_SETTINGS or name.startswith(KAFKA_PREFIXES)
