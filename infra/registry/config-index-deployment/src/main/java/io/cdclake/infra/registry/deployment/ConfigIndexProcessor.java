package io.cdclake.infra.registry.deployment;

import java.util.ArrayList;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import javax.inject.Singleton;

import org.jboss.jandex.AnnotationInstance;
import org.jboss.jandex.AnnotationTarget;
import org.jboss.jandex.AnnotationValue;
import org.jboss.jandex.DotName;
import org.jboss.jandex.Type;

import apicurio.common.app.components.config.index.DynamicPropertiesInfoRecorder;
import io.apicurio.common.apps.config.DynamicConfigPropertyDef;
import io.apicurio.common.apps.config.DynamicConfigPropertyList;
import io.quarkus.arc.deployment.BeanDiscoveryFinishedBuildItem;
import io.quarkus.arc.deployment.SyntheticBeanBuildItem;
import io.quarkus.arc.processor.InjectionPointInfo;
import io.quarkus.deployment.annotations.BuildStep;
import io.quarkus.deployment.annotations.ExecutionTime;
import io.quarkus.deployment.annotations.Record;
import io.quarkus.deployment.builditem.FeatureBuildItem;

/**
 * Build steps of the config-index extension: every injection point that
 * carries both {@code @ConfigProperty} and {@code @Dynamic} (the registry
 * injects such properties as {@code Supplier<T>}) becomes a
 * {@link DynamicConfigPropertyDef}; the list is recorded and offered as the
 * {@link DynamicConfigPropertyList} bean.
 */
public class ConfigIndexProcessor {

    private static final DotName CONFIG_PROPERTY =
            DotName.createSimple("org.eclipse.microprofile.config.inject.ConfigProperty");
    private static final DotName DYNAMIC = DotName.createSimple("io.apicurio.common.apps.config.Dynamic");
    private static final DotName SUPPLIER = DotName.createSimple("java.util.function.Supplier");

    @BuildStep
    FeatureBuildItem feature() {
        return new FeatureBuildItem("apicurio-config-index");
    }

    @BuildStep
    @Record(ExecutionTime.STATIC_INIT)
    SyntheticBeanBuildItem dynamicProperties(DynamicPropertiesInfoRecorder recorder,
            BeanDiscoveryFinishedBuildItem discovery) {
        Map<String, DynamicConfigPropertyDef> byName = new LinkedHashMap<>();
        for (InjectionPointInfo ip : discovery.getInjectionPoints()) {
            AnnotationInstance property = ip.getRequiredQualifier(CONFIG_PROPERTY);
            AnnotationInstance dynamic = annotationOf(ip, DYNAMIC);
            if (property == null || dynamic == null) {
                continue;
            }
            String name = property.value("name").asString();
            AnnotationValue dv = property.value("defaultValue");
            DynamicConfigPropertyDef def = new DynamicConfigPropertyDef(name, valueClass(ip.getRequiredType()),
                    dv == null ? null : dv.asString());
            def.setLabel(stringOr(dynamic.value("label"), null));
            def.setDescription(stringOr(dynamic.value("description"), null));
            AnnotationValue requires = dynamic.value("requires");
            def.setRequires(requires == null ? new String[0] : requires.asStringArray());
            byName.putIfAbsent(name, def);
        }
        List<DynamicConfigPropertyDef> defs = new ArrayList<>(byName.values());
        defs.sort(Comparator.comparing(DynamicConfigPropertyDef::getName));
        return SyntheticBeanBuildItem.configure(DynamicConfigPropertyList.class)
                .scope(Singleton.class)
                .unremovable()
                .runtimeValue(recorder.initializePropertiesInfo(defs))
                .done();
    }

    private static AnnotationInstance annotationOf(InjectionPointInfo ip, DotName name) {
        AnnotationTarget t = ip.getTarget();
        if (ip.isField()) {
            return t.asField().annotation(name);
        }
        if (t.kind() == AnnotationTarget.Kind.METHOD) {
            for (AnnotationInstance a : t.asMethod().annotations()) {
                if (a.name().equals(name) && a.target().kind() == AnnotationTarget.Kind.METHOD_PARAMETER
                        && a.target().asMethodParameter().position() == ip.getPosition()) {
                    return a;
                }
            }
        }
        return null;
    }

    /** The property's value type: T of a Supplier<T>, else the injected type. */
    private static Class<?> valueClass(Type type) {
        Type t = type;
        if (t.kind() == Type.Kind.PARAMETERIZED_TYPE && t.name().equals(SUPPLIER)
                && !t.asParameterizedType().arguments().isEmpty()) {
            t = t.asParameterizedType().arguments().get(0);
        }
        String cls;
        switch (t.kind()) {
            case PRIMITIVE:
                switch (t.asPrimitiveType().primitive()) {
                    case BOOLEAN: return Boolean.class;
                    case INT: return Integer.class;
                    case LONG: return Long.class;
                    default: return String.class;
                }
            case CLASS:
            case PARAMETERIZED_TYPE:
                cls = t.name().toString();
                break;
            default:
                return String.class;
        }
        try {
            return Class.forName(cls, false, Thread.currentThread().getContextClassLoader());
        } catch (ClassNotFoundException e) {
            return String.class;
        }
    }

    private static String stringOr(AnnotationValue v, String dflt) {
        return v == null ? dflt : v.asString();
    }
}
